-- Empties child {child} (every row in it done and past retention).
TRUNCATE {child}
