-- The order-processing database the sqlite3 workload queries (built natively, before
-- recording): two tables with indexes. Values come from multiplicative hashing of the
-- row number, not random(), so that every build is the same.
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
create table probe(i integer primary key, c integer);
with recursive r(i) as (select 1 union all select i + 1 from r where i < 200000)
  insert into probe select i, 1 + (i * 2654435761 + 12345) % 50000 from r;
