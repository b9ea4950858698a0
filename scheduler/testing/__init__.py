"""Test clusters for the test suite and the benchmarks: a docker-compose cluster on a real Docker engine
and a network-namespace cluster (``reshape netns``)."""
