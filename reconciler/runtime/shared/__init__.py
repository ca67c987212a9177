"""What every room of the runtime shares: the context (the store, the dirty sets, writes and
Events), the writer pool, patches, own writes and moves, timers, and the table of watched kinds."""
