-- System: forgets the projectors no runner has recorded alive since ?1.
DELETE FROM projector_runners WHERE seen_at < ?1
