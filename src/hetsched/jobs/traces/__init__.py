"""Trace loaders: every supported format to one :class:`~hetsched.jobs.model.JobTable`."""
