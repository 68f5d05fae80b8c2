pytest_plugins = ("bwd_suite.plugin",)  # the package's plugin, also its pytest11 entry point
