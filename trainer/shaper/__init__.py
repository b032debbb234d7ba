"""The network shaper: realistic links between worker containers (docs/network.md)."""
