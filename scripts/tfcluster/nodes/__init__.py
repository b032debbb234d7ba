"""Real hosts on one machine (scripts/nodes): network namespaces with engines, a registry, a swarm, faults."""
