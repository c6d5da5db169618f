# The framework's pytest plugins; being at the rootdir, this also puts the
# checkout first on sys.path (our `fixtures` package, not PyPI's).
pytest_plugins = ["reports.plugin", "fixtures.plugin", "fixtures.shard", "fixtures.rig",
                  "fixtures.pushpop", "fixtures.lifecycle", "fixtures.backends",
                  "fixtures.real_ports", "fixtures.system_traffic",
                  "fixtures.plain_rig", "fixtures.explore", "perf.plugin"]
