"""The network shaper: realistic links between worker containers (README.md, "Network profiles")."""
