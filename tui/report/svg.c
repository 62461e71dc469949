/*
 * svg: a flame graph of the model in one self-contained SVG file
 * (see svg.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "fmt.h"
#include "svg.h"

/* Geometry, in SVG user units (pixels). */
#define SVG_WIDTH   1200.0
#define SVG_PAD     10.0
#define SVG_FRAME   17.0          /* row height, box is one less */
#define SVG_TOP     60.0          /* title and subtitle */
#define SVG_BOTTOM  30.0          /* details line */
#define SVG_CHAR    7.0           /* 12px monospace, approximately */
#define SVG_MIN     0.1           /* narrower boxes are not drawn */

static const char script[] =
"var W = %g, X0 = %g, CH = %g;\n"
"function label(name, w) {\n"
"  var n = Math.floor((w - 6) / CH);\n"
"  if (n < 3) return '';\n"
"  return name.length <= n ? name : name.substring(0, n - 2) + '..';\n"
"}\n"
"function num(g, a) { return parseFloat(g.getAttribute(a)); }\n"
"function zoom(t) {\n"
"  var x0 = num(t, 'data-x'), w0 = num(t, 'data-w'), d0 = num(t, 'data-d');\n"
"  var fs = document.getElementsByClassName('f');\n"
"  for (var i = 0; i < fs.length; i++) {\n"
"    var g = fs[i], x = num(g, 'data-x'), w = num(g, 'data-w'), d = num(g, 'data-d');\n"
"    var nx, nw, e = 1e-9 + w0 * 1e-9;\n"
"    if (d < d0 && x <= x0 + e && x + w >= x0 + w0 - e) {\n"
"      nx = 0; nw = 1; g.style.opacity = '0.6';\n"
"    } else if (d >= d0 && x >= x0 - e && x + w <= x0 + w0 + e) {\n"
"      nx = (x - x0) / w0; nw = w / w0; g.style.opacity = '';\n"
"    } else {\n"
"      g.style.display = 'none'; continue;\n"
"    }\n"
"    g.style.display = '';\n"
"    var r = g.getElementsByTagName('rect')[0], tx = g.getElementsByTagName('text')[0];\n"
"    r.setAttribute('x', X0 + nx * W);\n"
"    r.setAttribute('width', Math.max(nw * W - 1, 0.1));\n"
"    tx.setAttribute('x', X0 + nx * W + 3);\n"
"    tx.textContent = label(g.getAttribute('data-n'), nw * W);\n"
"  }\n"
"  document.getElementById('reset').style.display = d0 > 0 ? '' : 'none';\n"
"}\n"
"function init() {\n"
"  var fs = document.getElementsByClassName('f');\n"
"  for (var i = 0; i < fs.length; i++)\n"
"    fs[i].addEventListener('click', function (ev) { zoom(this); ev.stopPropagation(); });\n"
"  document.getElementById('reset').addEventListener('click', function () { zoom(fs[0]); });\n"
"  for (var i = 0; i < fs.length; i++) {\n"
"    fs[i].addEventListener('mouseover', function () {\n"
"      document.getElementById('details').textContent = this.getElementsByTagName('title')[0].textContent;\n"
"    });\n"
"  }\n"
"}\n"
"window.addEventListener('load', init);\n";

struct ctx {
	FILE *f;
	struct flame *fl;
	enum report_weight w;
	double total;
	double height;
	uint32_t *kids;        /* scratch for sorting children, used as a stack */
	uint32_t top;          /* first free entry of kids */
};

static int by_name(const void *a, const void *b, void *arg)
{
	const struct flame *fl = arg;
	const struct flame_node *x = &fl->n[*(const uint32_t *)a];
	const struct flame_node *y = &fl->n[*(const uint32_t *)b];
	int r = strcmp(x->name, y->name);
	return r ? r : x->inlined - y->inlined;
}

static const char *value_text(const struct ctx *c, double v, char *buf, size_t len)
{
	char t[32];
	if (c->w == WEIGHT_OBJECTS)
		snprintf(buf, len, "%s objects", fmt_count(v, t, sizeof t));
	else
		snprintf(buf, len, "%s", fmt_bytes(v, t, sizeof t));
	return buf;
}

/* Deterministic warm colors per name, like flamegraph.pl's; blue for
 * inlined frames. */
static void color(const struct flame_node *x, int *r, int *g, int *b)
{
	uint32_t h = 2166136261u;
	for (const unsigned char *p = (const unsigned char *)x->name; *p; p++)
		h = (h ^ *p) * 16777619u;
	if (x->inlined) {
		*r = 80 + (int)(h % 60);
		*g = 150 + (int)((h >> 8) % 60);
		*b = 210 + (int)((h >> 16) % 45);
	} else if (x->depth == 0) {
		*r = 200; *g = 200; *b = 200;
	} else {
		*r = 205 + (int)(h % 50);
		*g = (int)((h >> 8) % 230);
		*b = (int)((h >> 16) % 55);
	}
}

/* Label that fits width w: the name, or its start and "..". */
static void put_label(FILE *f, const char *name, double w)
{
	long n = (long)((w - 6) / SVG_CHAR);
	if (n < 3)
		return;
	size_t len = strlen(name);
	if ((long)len <= n) {
		fmt_xml_string(f, name);
		return;
	}
	char buf[512];
	size_t k = (size_t)(n - 2) < sizeof buf - 3 ? (size_t)(n - 2) : sizeof buf - 3;
	/* Do not cut a UTF-8 sequence in two. */
	while (k > 0 && ((unsigned char)name[k] & 0xc0) == 0x80)
		k--;
	memcpy(buf, name, k);
	memcpy(buf + k, "..", 3);
	fmt_xml_string(f, buf);
}

static void frame(struct ctx *c, uint32_t i, double x)
{
	const struct flame_node *n = &c->fl->n[i];
	double frac = c->total > 0 ? n->value / c->total : 0;
	double w = frac * (SVG_WIDTH - 2 * SVG_PAD);
	if (w < SVG_MIN)
		return;
	double px = SVG_PAD + x * (SVG_WIDTH - 2 * SVG_PAD);
	double y = c->height - SVG_BOTTOM - (n->depth + 1) * SVG_FRAME;
	char v[48];
	int r, g, b;
	color(n, &r, &g, &b);
	const char *suffix = n->inlined ? " [inlined]" : "";
	fprintf(c->f, "<g class=\"f\" data-x=\"%.9f\" data-w=\"%.9f\" data-d=\"%u\" data-n=\"",
		x, frac, n->depth);
	fmt_xml_string(c->f, n->name);
	fputs("\"><title>", c->f);
	fmt_xml_string(c->f, n->name);
	fprintf(c->f, "%s (%s, %.2f%%)</title>", suffix, value_text(c, n->value, v, sizeof v),
		100.0 * frac);
	fprintf(c->f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
		"rx=\"2\" fill=\"rgb(%d,%d,%d)\"/>", px, y, w > 1 ? w - 1 : w,
		SVG_FRAME - 1, r, g, b);
	fprintf(c->f, "<text x=\"%.2f\" y=\"%.1f\">", px + 3, y + SVG_FRAME - 5);
	put_label(c->f, n->name, w);
	fputs("</text></g>\n", c->f);

	/* Children, in name order, left to right. */
	uint32_t k = 0, first = 0;
	for (uint32_t ch = n->child; ch != FLAME_NONE; ch = c->fl->n[ch].next)
		k++;
	if (k == 0)
		return;
	/* This node's children sit at kids[first..first+k); deeper calls
	 * use the space after them (every node is someone's child once, so
	 * count + 1 entries are enough). */
	first = c->top;
	c->top += k;
	uint32_t j = first;
	for (uint32_t ch = n->child; ch != FLAME_NONE; ch = c->fl->n[ch].next)
		c->kids[j++] = ch;
	qsort_r(c->kids + first, k, sizeof *c->kids, by_name, c->fl);
	double cx = x;
	for (j = first; j < first + k; j++) {
		uint32_t ch = c->kids[j];
		frame(c, ch, cx);
		cx += c->total > 0 ? c->fl->n[ch].value / c->total : 0;
	}
	c->top = first;
}

int svg_write(FILE *f, struct model *m, struct sym *s,
	      const struct report_opts *o)
{
	struct flame fl;
	if (flame_build(&fl, m, s, o->rules, o->weight) != 0) {
		errno = ENOMEM;
		return -1;
	}
	struct ctx c = { f, &fl, o->weight, fl.n[0].value, 0, NULL, 0 };
	c.kids = malloc(((size_t)fl.count + 1) * sizeof *c.kids);
	if (!c.kids) {
		flame_free(&fl);
		errno = ENOMEM;
		return -1;
	}
	c.height = SVG_TOP + (fl.max_depth + 1) * SVG_FRAME + SVG_BOTTOM;
	char v[48];
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
		"width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
		SVG_WIDTH, c.height, SVG_WIDTH, c.height);
	fputs("<style>text { font-family: monospace; font-size: 12px; fill: #000; }\n"
	      "g.f text { pointer-events: none; }\n"
	      "g.f:hover rect { stroke: #000; stroke-width: 0.5; cursor: pointer; }\n"
	      "#title { font-size: 17px; } #reset { cursor: pointer; fill: #0645ad; }\n"
	      "</style>\n", f);
	fprintf(f, "<script type=\"text/ecmascript\"><![CDATA[\n");
	fprintf(f, script, SVG_WIDTH - 2 * SVG_PAD, SVG_PAD, SVG_CHAR);
	fputs("]]></script>\n", f);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#f8f8f0\"/>\n",
		SVG_WIDTH, c.height);
	fprintf(f, "<text id=\"title\" x=\"%.0f\" y=\"24\" text-anchor=\"middle\">"
		"Heap flame graph: %s</text>\n", SVG_WIDTH / 2,
		report_weight_name(o->weight));
	fprintf(f, "<text x=\"%.0f\" y=\"44\" text-anchor=\"middle\">pid %ld (",
		SVG_WIDTH / 2, (long)model_pid(m));
	fmt_xml_string(f, model_exe(m));
	fprintf(f, "), %s, total %s", model_state(m), value_text(&c, c.total, v,
								 sizeof v));
	/* Each kind's share: the boxes under [malloc] and [mmap]. */
	const char *sep = " (";
	static const uint32_t kinds[] = { YM_KIND_MALLOC, YM_KIND_MMAP };
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
		const char *kn = flame_kind_frame(kinds[i]);
		for (uint32_t k = fl.n[0].child; k != FLAME_NONE; k = fl.n[k].next) {
			if (strcmp(fl.n[k].name, kn))
				continue;
			fprintf(f, "%s%.*s %s", sep, (int)strlen(kn) - 2, kn + 1,
				value_text(&c, fl.n[k].value, v, sizeof v));
			sep = ", ";
		}
	}
	fprintf(f, "%s%s, ymtop %s</text>\n", *sep == ',' ? ")" : "",
		o->weight == WEIGHT_OBJECTS ? "" : ", estimated requested bytes",
		YM_VERSION);
	fprintf(f, "<text id=\"reset\" x=\"%.0f\" y=\"24\" style=\"display:none\">"
		"Reset zoom</text>\n", SVG_PAD);
	fprintf(f, "<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n", SVG_PAD,
		c.height - 10);
	if (c.total > 0)
		frame(&c, 0, 0.0);
	else
		fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">"
			"(no samples)</text>\n", SVG_WIDTH / 2, c.height / 2);
	fputs("</svg>\n", f);
	free(c.kids);
	flame_free(&fl);
	return ferror(f) ? -1 : 0;
}
