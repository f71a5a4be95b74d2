/* A compiler input of moderate size: structs, a hash table, sorting, string
   handling, recursion and loops the optimiser works on (inlining, unrolling,
   vectorisation, register allocation). */
/* Declarations of the C library functions used (instead of #include: the compiler
   proper, cc1, is run without the driver's include paths). */
typedef unsigned long size_t;
#define NULL ((void *)0)
int printf(const char *, ...);
int snprintf(char *, size_t, const char *, ...);
void *malloc(size_t);
void *calloc(size_t, size_t);
void free(void *);
void qsort(void *, size_t, size_t, int (*)(const void *, const void *));
int atoi(const char *);
int strcmp(const char *, const char *);
char *strncpy(char *, const char *, size_t);
size_t strlen(const char *);

struct item { char name[24]; int weight; double value; struct item *next; };
struct table { struct item **slots; size_t n, used; };

static unsigned long hash(const char *s) {
  unsigned long h = 5381;
  while (*s) h = h * 33 + (unsigned char)*s++;
  return h;
}

static struct table *table_new(size_t n) {
  struct table *t = malloc(sizeof *t);
  t->slots = calloc(n, sizeof *t->slots);
  t->n = n; t->used = 0;
  return t;
}

static struct item *table_get(struct table *t, const char *name, int create) {
  size_t i = hash(name) % t->n;
  for (struct item *p = t->slots[i]; p; p = p->next)
    if (!strcmp(p->name, name)) return p;
  if (!create) return NULL;
  struct item *p = calloc(1, sizeof *p);
  strncpy(p->name, name, sizeof p->name - 1);
  p->next = t->slots[i]; t->slots[i] = p; t->used++;
  return p;
}

static int by_value(const void *a, const void *b) {
  const struct item *x = *(struct item *const *)a, *y = *(struct item *const *)b;
  return (x->value < y->value) - (x->value > y->value);
}

static double knapsack(struct item **items, int n, int cap) {
  double *best = calloc((size_t)cap + 1, sizeof *best);
  for (int i = 0; i < n; i++)
    for (int c = cap; c >= items[i]->weight; c--) {
      double v = best[c - items[i]->weight] + items[i]->value;
      if (v > best[c]) best[c] = v;
    }
  double r = best[cap];
  free(best);
  return r;
}

static void matmul(int n, const double *a, const double *b, double *c) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n; k++) {
      double aik = a[i * n + k];
      for (int j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
    }
}

static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static void reverse_words(char *s) {
  size_t len = strlen(s);
  for (size_t i = 0; i < len / 2; i++) { char t = s[i]; s[i] = s[len - 1 - i]; s[len - 1 - i] = t; }
  char *w = s;
  for (char *p = s;; p++)
    if (*p == ' ' || *p == 0) {
      for (char *a = w, *b = p - 1; a < b; a++, b--) { char t = *a; *a = *b; *b = t; }
      if (!*p) break;
      w = p + 1;
    }
}

struct node { int key, height; struct node *l, *r; };
static int h(struct node *n) { return n ? n->height : 0; }
static int max(int a, int b) { return a > b ? a : b; }
static struct node *rot_r(struct node *y) {
  struct node *x = y->l; y->l = x->r; x->r = y;
  y->height = 1 + max(h(y->l), h(y->r)); x->height = 1 + max(h(x->l), h(x->r));
  return x;
}
static struct node *rot_l(struct node *x) {
  struct node *y = x->r; x->r = y->l; y->l = x;
  x->height = 1 + max(h(x->l), h(x->r)); y->height = 1 + max(h(y->l), h(y->r));
  return y;
}
static struct node *avl_insert(struct node *n, int key) {
  if (!n) { n = calloc(1, sizeof *n); n->key = key; n->height = 1; return n; }
  if (key < n->key) n->l = avl_insert(n->l, key);
  else if (key > n->key) n->r = avl_insert(n->r, key);
  else return n;
  n->height = 1 + max(h(n->l), h(n->r));
  int bal = h(n->l) - h(n->r);
  if (bal > 1 && key < n->l->key) return rot_r(n);
  if (bal < -1 && key > n->r->key) return rot_l(n);
  if (bal > 1 && key > n->l->key) { n->l = rot_l(n->l); return rot_r(n); }
  if (bal < -1 && key < n->r->key) { n->r = rot_r(n->r); return rot_l(n); }
  return n;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  struct table *t = table_new(1024);
  char name[24];
  unsigned x = 7;
  for (int i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    snprintf(name, sizeof name, "item%u", x % 5000);
    struct item *it = table_get(t, name, 1);
    it->weight = 1 + (int)(x >> 20) % 50;
    it->value += (x >> 8) % 1000 / 10.0;
  }
  struct item **all = malloc(t->used * sizeof *all);
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++)
    for (struct item *p = t->slots[i]; p; p = p->next) all[k++] = p;
  qsort(all, k, sizeof *all, by_value);
  double best = knapsack(all, (int)(k < 200 ? k : 200), 1000);
  int m = 64;
  double *a = calloc((size_t)m * m, sizeof *a), *b = calloc((size_t)m * m, sizeof *b), *c = calloc((size_t)m * m, sizeof *c);
  for (int i = 0; i < m * m; i++) { a[i] = i % 7; b[i] = i % 5; }
  matmul(m, a, b, c);
  struct node *root = NULL;
  for (int i = 0; i < n; i++) root = avl_insert(root, (int)((i * 2654435761u) % 100000));
  char s[] = "the quick brown fox jumps over the lazy dog";
  reverse_words(s);
  printf("%zu %.1f %.1f %ld %d %s\n", k, best, c[m * m - 1], fib(20), h(root), s);
  return 0;
}
