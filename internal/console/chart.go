package console

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/skipq/skipq/internal/service"
)

// chart is a depth chart drawn as inline SVG on the server: no script and
// no chart library, so the page makes no request and runs no code for it.
type chart struct {
	Width, Height int
	Lines         []chartLine
	Points        int
	Span          string // the time span the snapshots cover
	Max           int64
	Ticks         []chartTick
}

type chartLine struct {
	Class, Label string
	Points       string   // the polyline's "x,y x,y …"
	Dots         [][2]int // with fewer than 3 snapshots, each one as a dot
	Last         int64
}

type chartTick struct {
	Y     int
	Label string
}

const (
	chartWidth, chartHeight = 720, 180
	chartLeft, chartBottom  = 48, 20
)

// newChart draws whatever snapshots exist (one snapshot is one point),
// oldest on the left, scaled to the largest value.
func newChart(points []service.DepthPoint) chart {
	c := chart{Width: chartWidth, Height: chartHeight, Points: len(points)}
	if len(points) == 0 {
		c.Span = "no snapshots yet"
		return c
	}
	first, last := points[0].At, points[len(points)-1].At
	c.Span = fmt.Sprintf("%s – %s UTC, %d snapshots", first.UTC().Format("15:04"), last.UTC().Format("15:04"), len(points))
	if len(points) == 1 {
		c.Span = fmt.Sprintf("%s UTC, 1 snapshot", first.UTC().Format("15:04:05"))
	}
	series := []struct {
		class, label string
		value        func(service.DepthPoint) int64
	}{
		{"available", "available", func(p service.DepthPoint) int64 { return p.Available }},
		{"in-flight", "in flight", func(p service.DepthPoint) int64 { return p.InFlight }},
		{"dead-lettered", "dead-lettered", func(p service.DepthPoint) int64 { return p.DeadLettered }},
	}
	for _, p := range points {
		for _, s := range series {
			c.Max = max(c.Max, s.value(p))
		}
	}
	top := max(c.Max, 1)
	plotW, plotH := chartWidth-chartLeft-8, chartHeight-chartBottom-8
	span := last.Sub(first)
	x := func(t time.Time) int {
		if span <= 0 {
			return chartLeft + plotW/2
		}
		return chartLeft + int(float64(plotW)*float64(t.Sub(first))/float64(span))
	}
	y := func(v int64) int { return 8 + plotH - int(float64(plotH)*float64(v)/float64(top)) }
	for _, s := range series {
		var b strings.Builder
		l := chartLine{Class: s.class, Label: s.label, Last: s.value(points[len(points)-1])}
		for i, p := range points {
			if i > 0 {
				b.WriteByte(' ')
			}
			px, py := x(p.At), y(s.value(p))
			b.WriteString(strconv.Itoa(px) + "," + strconv.Itoa(py))
			if len(points) < 3 {
				l.Dots = append(l.Dots, [2]int{px, py})
			}
		}
		l.Points = b.String()
		c.Lines = append(c.Lines, l)
	}
	c.Ticks = []chartTick{{Y: y(top), Label: strconv.FormatInt(top, 10)}, {Y: y(top / 2), Label: strconv.FormatInt(top/2, 10)}, {Y: y(0), Label: "0"}}
	return c
}
