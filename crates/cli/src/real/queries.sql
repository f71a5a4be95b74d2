-- An order-processing database: two tables with indexes, a bulk load, then a query
-- mix of point lookups, range scans, a group-by and a join. Values come from
-- multiplicative hashing of the row number, not random(), so that runs repeat.
create table customer(id integer primary key, name text, region integer, balance real);
create table orders(id integer primary key, customer integer, item integer, qty integer, price real);
with recursive r(i) as (select 1 union all select i + 1 from r where i < 50000)
  insert into customer select i, printf('%08x%08x', (i * 2654435761) % 4294967296, (i * 40503) % 65536),
    (i * 7919) % 50, (i * 104729) % 10000 from r;
with recursive r(i) as (select 1 union all select i + 1 from r where i < 300000)
  insert into orders select i, 1 + (i * 2654435761) % 50000, (i * 40503) % 5000, 1 + (i * 7) % 9,
    ((i * 6700417) % 1000) / 10.0 from r;
create index orders_customer on orders(customer);
create index orders_item on orders(item);
create index customer_region on customer(region);
select count(*), sum(qty * price) from orders where customer in (select id from customer where region = 7);
with recursive k(i, c) as (select 1, 17 union all select i + 1, (c * 1103 + 12345) % 50000 + 1 from k where i < 20000)
  select count(*), sum(o.qty) from k join orders o on o.customer = k.c;
select item, count(*), sum(qty) from orders group by item order by 3 desc limit 5;
select c.region, count(*), avg(o.price) from customer c join orders o on o.customer = c.id group by c.region order by 1 limit 5;
select count(*) from orders where item between 1000 and 1400 and qty > 4;
