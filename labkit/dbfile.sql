-- table_names --
-- The tables of a database, to recognise a labkit file before touching it.
SELECT name FROM sqlite_master WHERE type = 'table'
