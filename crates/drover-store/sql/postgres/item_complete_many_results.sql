-- item_complete_many.sql with a result per item ($4, NULL elements for
-- none): complete_items' four-argument form (migration 0038). Called only
-- for a batch where some item has a result.
SELECT id FROM "{schema}".complete_items($1, $2, $3, $4) AS t(id)
