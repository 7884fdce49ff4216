package report

// The report's page model: what `mmlab all` and `mmlab report` hand to the
// HTML renderer. Experiments build Parts from their typed results; the
// renderer knows nothing of any experiment.

// Page is one whole report.
type Page struct {
	Title       string
	Generated   string   // when the page was made (RFC 3339)
	Command     string   // the command that produced the results
	Hosts       []Host   // every machine whose results the page holds
	Seeds       []Seed   // in seed order
	Comparison  *Table   // one row per host, when results of several hosts are given
	Interrupted bool     // the run was interrupted: the page shows what finished
	Notes       []string // page-wide remarks (a part skipped, and why)
}

// Host is one machine a result set came from.
type Host struct {
	Name    string  // a label: the hostname or the results directory
	Machine Machine // kernel release, CPUs, memory, Go
	Setting string  // "HZ=250, preempt none, 2 CPUs": what the live columns ran on
	Model   string  // the machine the model columns ran on, as ModelLabel prints it
}

// Seed is the section of one patch series.
type Seed struct {
	ID      string // "000", "003", "004"
	Title   string // the series' title
	Summary string // one line: the change
	Source  string // where the published figures come from
	Verdict string // the line a user acts on
	// Headline is the seed's figure in a few words, for the comparison of
	// hosts ("fork 174 ms during attach, 1.3 ms quiet").
	Headline string
	Parts    []Part // one per experiment, in order
}

// Part is what one experiment shows in its seed's section.
type Part struct {
	Experiment string
	Title      string
	Text       string // the experiment's table as the terminal prints it
	Tables     []Table
	Charts     []Chart
	Notes      []string
}

// Table is a titled grid of cells; Columns name the columns with their
// units and settings.
type Table struct {
	Title   string
	Columns []string
	Rows    [][]string
}

// ChartKind says how a chart is drawn.
type ChartKind string

const (
	// Lines: numeric X (CPUs), one polyline of points per series.
	Lines ChartKind = "lines"
	// Dots: categorical X (a case and mode), each series' points drawn as
	// dots side by side in the category (one dot per run), its median as a
	// bar across them.
	Dots ChartKind = "dots"
	// Bars: categorical X, one bar per series in each category.
	Bars ChartKind = "bars"
)

// Chart is one picture: axes with units, a legend (the series' names), and
// the command that reproduces it.
type Chart struct {
	Title      string
	Kind       ChartKind
	XLabel     string   // with its unit
	YLabel     string   // with its unit
	LogY       bool     // logarithmic Y axis (latencies spanning decades)
	LogX       bool     // Lines: logarithmic X axis (CPU counts doubling)
	Categories []string // Dots and Bars: the X categories, in order
	Series     []Series
	// Reference lines drawn across the plot (a quiet baseline).
	Refs    []Ref
	Command string
}

// Series is one variant's points.
type Series struct {
	Name   string
	Points []Point
}

// Point is one value. For Dots and Bars, X is the index into Categories.
type Point struct {
	X, Y float64
}

// Ref is a horizontal reference line at Y, labelled.
type Ref struct {
	Label string
	Y     float64
}
