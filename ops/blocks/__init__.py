"""Models built from the suite's ops for the training-step scenarios (suite/step/, docs/step.md):
each op a node whose backward calls the run's chosen implementation through the op's
contract; the Mamba-style and Transformer models registered as ModelSpecs."""
