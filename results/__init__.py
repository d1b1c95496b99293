"""The suite's one data shape: the typed records every part writes and reads (`records`), the append-only
results store that holds them (`store`) and its JSON Schema (`schema/store.schema.json`).

Its own part, below both `scripts/` (which writes records) and `analysis/` (which reads them): it imports
neither, so neither reaches into the other to share a record.
"""
