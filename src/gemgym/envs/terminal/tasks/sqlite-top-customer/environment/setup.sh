sqlite3 shop.db <<'SQL'
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, amount INTEGER);
INSERT INTO customers VALUES (1,'Ada'),(2,'Brian'),(3,'Chloe'),(4,'Dev');
INSERT INTO orders(customer_id, amount) VALUES
 (1,20),(1,30),(1,25),(1,10),(1,15),
 (2,400),
 (3,90),(3,95),(3,100),
 (4,5),(4,5),(4,5),(4,5),(4,5),(4,5),(4,5);
SQL
