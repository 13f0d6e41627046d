"""Cranfield's queue side: stored qrels, run blobs and the job functions RQ workers run.

Never imports Flask: the web service imports from here, not the other way round."""
