"""The Autotest equivalent: OVS install, sandbox, control channel, waits, logs, the launcher."""
