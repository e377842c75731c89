-- A measurement's samples move from JSON text to the compact, lossless binary encoding of
-- kymo_core::samples (every f64 exact, about a third of the bytes). SQL cannot write that
-- encoding, so the rows stored before this migration are converted once, at startup, by
-- Db::open (core/src/db/samples_conversion.rs), in batches of ids and resumably: this table
-- holds the id the conversion continues from, and its row is deleted when it is done.
-- A new database has nothing to convert and gets no row.
CREATE TABLE samples_conversion (
    next_id INTEGER NOT NULL
);
INSERT INTO samples_conversion (next_id) SELECT 0 WHERE EXISTS (SELECT 1 FROM measurements);
