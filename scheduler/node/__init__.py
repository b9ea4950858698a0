"""The node programs: the node monitor (``reshape nodemon``) and the jobs it runs on its node (docs/cluster.md)."""
