"""The training step as a conformance case (docs/step.md): scenarios of small models built from
the suite's ops, trained a few steps with each op's backward chosen per run, compared with
the same model in float64 after every step, and the equivalences a training loop relies on.
Nothing here knows an op or a model: the models register themselves (ops/blocks/)."""
