-- Moves the flow settings' generation (migration 0046), in the
-- transaction of a change of the rates in force or the closures: every
-- process's next claim sees it moved and reads the settings again.
UPDATE flow_generation SET gen = gen + 1
