"""The rootdir conftest: loads the framework's pytest plugins."""
# The framework's pytest plugins; being at the rootdir, this also puts the
# checkout first on sys.path (our `fixtures` package, not PyPI's).  A plugin other
# plugins import comes before them, so that pytest rewrites its asserts.
pytest_plugins = [
    "fixtures.records",
    "reports.plugin",
    "fixtures.requires",
    "fixtures.plugin",
    "fixtures.shard",
    "fixtures.alone",
    "fixtures.schedule",
    "fixtures.rig",
    "fixtures.tunnel_push_pop.pushpop",
    "fixtures.verdict",
    "fixtures.lifecycle",
    "fixtures.backends",
    "fixtures.real_ports",
    "fixtures.system_userspace.system_traffic",
    "fixtures.plain_rig",
    "fixtures.explore",
    "fixtures.system_dpdk.macros",
    "fixtures.dpdk_tunnel",
    "perf.plugin",
]
