-- When the last completed sweep pass ended (NULL: none yet). System role.
SELECT last_pass_at FROM sweep_lease WHERE name = 'sweep'
