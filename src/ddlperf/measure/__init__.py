"""Ground truth: an emulated cluster on one machine (namespaces, HTB links, CPU quotas)."""
