// Command shoal-bench is Shoal's MQTT load generator: it runs one scenario
// against a broker and writes the result as JSON, or (shoal-bench report)
// compares the results of several runs. See bench/README.md.
package main
