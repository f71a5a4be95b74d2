-- The query mix of the sqlite3 workload, on the database load.sql built: first
-- 200,000 point lookups of pseudo-random customers' orders (the probe table)
-- through an index (what the recorded window covers), then an IN-subquery,
-- group-bys, a join and a range scan; a page cache large enough to hold the whole
-- database (64 MiB).
pragma cache_size = -65536;
select count(*), sum(o.qty) from probe k join orders o on o.customer = k.c;
select count(*), sum(qty * price) from orders where customer in (select id from customer where region = 7);
select item, count(*), sum(qty) from orders group by item order by 3 desc limit 5;
select c.region, count(*), avg(o.price) from customer c join orders o on o.customer = c.id group by c.region order by 1 limit 5;
select count(*) from orders where item between 1000 and 1400 and qty > 4;
