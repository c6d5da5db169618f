"""./ovstest's modes: the launcher, the flake hunter, coverage, build compare, the
source build; nothing a case imports."""
