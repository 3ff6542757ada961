-- PostgreSQL's counter of jobs made ready below the tail (its claims start
-- where earlier claims ended while it stands still): this backend's claims
-- always scan from the head. Kept as a version so the three backends'
-- migrations stay in step.
SELECT 1;
