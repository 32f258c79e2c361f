-- System role: the oldest child, locked before the pin is checked and its
-- events counted, so neither can change before the truncation. {slot} is an
-- integer 0-3 spliced by the store.
LOCK TABLE events_{slot} IN ACCESS EXCLUSIVE MODE
