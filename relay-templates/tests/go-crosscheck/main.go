// Cross-checks tests/conformance.yaml against the real Go text/template, with the relay's
// 15 functions implemented here the way the original relay defines them. Run by run.sh.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"text/template"
	"time"
)

type Case struct {
	Name     string  `json:"name"`
	Template string  `json:"template"`
	Data     *string `json:"data"`
	Want     *string `json:"want"`
	Error    *string `json:"error"`
}

// Cases Go cannot agree with here: features newer than the Go under test, and the one
// place where relay-templates is deliberately more lenient.
var expectedToDiffer = map[string]string{
	"range over int":                 "Go 1.22+",
	"else with":                      "Go 1.23+",
	"join strings":                   "relay-templates accepts a JSON list of strings; Go wants []string",
	"timeFormat ten fraction digits": "Go 1.19 parses at most nine fraction digits for .999; newer Go takes any number",
}

func funcs() template.FuncMap {
	env := map[string]string{"EVENTS_TELEGRAM_BOT_PLATFORM": "123:abc=-100200"}
	vars := map[string]string{"URL": "https://api.telegram.org/bot%s/sendMessage?chat_id=%s"}
	return template.FuncMap{
		"regexReplaceAll": func(re, repl, s string) (string, error) {
			r, err := regexp.Compile(re)
			if err != nil {
				return "", err
			}
			return r.ReplaceAllString(s, repl), nil
		},
		"regexMatch": func(re, s string) (bool, error) { return regexp.MatchString(re, s) },
		"replaceAll": func(f, t, s string) (string, error) { return strings.Replace(s, f, t, -1), nil },
		"toLower":    strings.ToLower,
		"toUpper":    strings.ToUpper,
		"toTitle":    strings.Title,
		"toJSON": func(i interface{}) (string, error) {
			b, err := json.Marshal(i)
			return strings.TrimSpace(string(b)), err
		},
		"split": func(sep, s string) ([]string, error) {
			s = strings.TrimSpace(s)
			if s == "" {
				return []string{}, nil
			}
			return strings.Split(s, sep), nil
		},
		"join":    func(sep string, a []string) (string, error) { return strings.Join(a, sep), nil },
		"isEmpty": func(s string) (bool, error) { return len(strings.TrimSpace(s)) == 0, nil },
		"getEnv":  func(k string) (string, error) { return env[k], nil },
		"getVar": func(k string) (string, error) {
			if v, ok := vars[k]; ok {
				return v, nil
			}
			return "<invalid Value>", nil
		},
		"timeFormat": func(s, layout string) (string, error) {
			t, err := time.Parse("2006-01-02T15:04:05.999Z", s)
			if err != nil {
				return s, err
			}
			return t.Format(layout), nil
		},
		"jsonEscape": func(s string) (string, error) {
			b, err := json.Marshal(s)
			return string(b), err
		},
		"toString": func(i interface{}) (string, error) {
			if i == nil {
				return "", nil
			}
			return fmt.Sprintf("%v", i), nil
		},
	}
}

func main() {
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var cases []Case
	if err := json.Unmarshal(raw, &cases); err != nil {
		panic(err)
	}
	agree, differ, unexpected := 0, 0, 0
	for _, c := range cases {
		d := "{}"
		if c.Data != nil {
			d = *c.Data
		}
		var data interface{}
		if err := json.Unmarshal([]byte(d), &data); err != nil {
			panic(c.Name + ": " + err.Error())
		}
		out, errText := "", ""
		t, err := template.New("main").Funcs(funcs()).Parse(c.Template)
		if err != nil {
			errText = err.Error()
		} else {
			var buf bytes.Buffer
			if err := t.ExecuteTemplate(&buf, "main", data); err != nil {
				errText = err.Error()
			} else {
				out = buf.String()
			}
		}
		ok := false
		if c.Want != nil {
			ok = errText == "" && out == *c.Want
		} else if c.Error != nil {
			ok = errText != "" && strings.Contains(errText, *c.Error)
		}
		switch {
		case ok:
			agree++
		case expectedToDiffer[c.Name] != "":
			differ++
			fmt.Printf("expected difference: %s (%s)\n", c.Name, expectedToDiffer[c.Name])
		default:
			unexpected++
			fmt.Printf("MISMATCH %s\n  template %q\n  go: out=%q err=%q\n", c.Name, c.Template, out, errText)
		}
	}
	fmt.Printf("go agrees on %d of %d cases; %d expected differences; %d mismatches\n", agree, len(cases), differ, unexpected)
	if unexpected > 0 {
		os.Exit(1)
	}
}
