"""Tests of the cross_entropy op."""
