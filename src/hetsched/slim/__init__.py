"""Slim Scheduler: a segmented, universally slimmable SlimResNet served on heterogeneous servers."""
