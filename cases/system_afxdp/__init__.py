"""system-afxdp.at, and AF_XDP's modes beyond it."""
