-- System role: empties one child of the ring. {slot} is an integer 0-3
-- spliced by the store (TRUNCATE takes no parameters).
TRUNCATE events_{slot}
