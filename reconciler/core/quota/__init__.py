"""Quota bookkeeping: the ledger, capacity and cohorts, the admitted cache, device inventory checks."""
