-- Writes the cells a claim moved, in the claim's transaction: ?1 a JSON
-- array of [key, tat micros].
INSERT INTO rate_cells (key, tat)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1) WHERE true
ON CONFLICT (key) DO UPDATE SET tat = excluded.tat
