-- create_tables --
-- A grading run's own tables beside its jobs, in the store's schema: its settings, its task list and the notebooks as enqueued.
CREATE TABLE IF NOT EXISTS grading_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS grading_notebooks (
    sha256  TEXT NOT NULL,
    name    TEXT NOT NULL,
    content BYTEA NOT NULL,
    PRIMARY KEY (sha256, name)
)

-- get_meta --
-- One of the run's documents (its plan, its task list), or no row.
SELECT value FROM grading_meta WHERE name = :name

-- set_meta --
-- Write one of the run's documents, replacing what was there.
INSERT INTO grading_meta (name, value) VALUES (:name, :value)
ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value

-- put_notebook --
-- Keep a notebook as enqueued (the same content under the same name is kept once).
INSERT INTO grading_notebooks (sha256, name, content) VALUES (:sha256, :name, :content)
ON CONFLICT DO NOTHING

-- get_notebook --
-- A notebook's bytes, by its content hash and file name.
SELECT content FROM grading_notebooks WHERE sha256 = :sha256 AND name = :name
