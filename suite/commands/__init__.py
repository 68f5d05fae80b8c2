"""One module per extra CLI command (`python -m bwd_suite <module name>`).

Each module defines HELP (one line), `add_arguments(parser)` and `main(args) -> int`; a
bad input raises `suite.errors.SuiteInputError`, which the CLI turns into exit code 2.
"""
