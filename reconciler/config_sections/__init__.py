"""The sections of the Configuration (`reconciler.config`), each with its values and its checks.

`reconciler.config` reads the document and puts the sections together; it is the one to import.
"""
