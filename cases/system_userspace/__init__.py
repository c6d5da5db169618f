"""make check-system-userspace (and check-system-tso): system-traffic.at, system-interface.at,
system-route.at, system-layer3-tunnels.at and system-userspace-packet-type-aware.at."""
