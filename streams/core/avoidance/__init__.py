"""Proactive straggler avoidance (SPEC 6, issue 17): node status at task entry, a regression tree per task
type, and an adviser that tells a scheduler to allow or avoid a node, with the tree path as its reason."""
