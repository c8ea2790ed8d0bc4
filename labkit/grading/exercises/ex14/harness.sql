-- copy_checkpoints_the_charge --
-- Exercise 14: a second copy of the job (another worker) checkpoints the order's charge first.
INSERT INTO job_steps (order_id, step, result) VALUES (:id, 'charge', :result)
