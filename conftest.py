import pytest

pytest_plugins = ("bwd_suite.plugin",)  # the package's plugin, also its pytest11 entry point


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """`-n N` without `--dist` schedules by work stealing here: xdist's default hands out
    items in advance, and behind the few long harness tests one worker sat idle at the end
    (2 cores: 515-521 s against 404 s). Runs before xdist's hook, which would pick "load"."""
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "worksteal"
