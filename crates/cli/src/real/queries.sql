-- The query mix of the sqlite3 workload, on the database load.sql built: point
-- lookups through an index, a join, group-bys and a range scan, with a page cache
-- large enough to hold the whole database (64 MiB).
pragma cache_size = -65536;
select count(*), sum(qty * price) from orders where customer in (select id from customer where region = 7);
with recursive k(i, c) as (select 1, 17 union all select i + 1, (c * 1103 + 12345) % 50000 + 1 from k where i < 20000)
  select count(*), sum(o.qty) from k join orders o on o.customer = k.c;
select item, count(*), sum(qty) from orders group by item order by 3 desc limit 5;
select c.region, count(*), avg(o.price) from customer c join orders o on o.customer = c.id group by c.region order by 1 limit 5;
select count(*) from orders where item between 1000 and 1400 and qty > 4;
