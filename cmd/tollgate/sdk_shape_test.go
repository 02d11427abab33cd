package main

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// notReported are fields an SDK's types mark required that a gateway has nothing to say
// about: access_programs is the OpenAI account's access program for the model, which no
// other backend has.
var notReported = map[string]bool{"access_programs": true}

// missingRequired lists the fields of v, an SDK type decoded from an answer (openai-go's or
// anthropic-sdk-go's), that the SDK's
// types mark required (api:"required") and the answer left out, by JSON path. A union is
// checked as the variant its type names (AsAny); nested objects and arrays are walked.
func missingRequired(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return missingRequired(v.Elem(), path)
	case reflect.Slice:
		var out []string
		for i := range v.Len() {
			out = append(out, missingRequired(v.Index(i), path+"["+strconv.Itoa(i)+"]")...)
		}
		return out
	case reflect.Struct:
	default:
		return nil
	}
	if m := v.MethodByName("AsAny"); m.IsValid() && m.Type().NumIn() == 0 && m.Type().NumOut() == 1 {
		return missingRequired(m.Call(nil)[0], path)
	}
	meta := v.FieldByName("JSON")
	if !meta.IsValid() {
		return nil
	}
	var out []string
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || f.Name == "JSON" || name == "" || name == "-" || notReported[name] {
			continue
		}
		field, ok := meta.FieldByName(f.Name).Interface().(interface{ Raw() string }) // either SDK's respjson.Field
		if !ok {
			continue
		}
		switch field.Raw() {
		case respjson.Omitted:
			if f.Tag.Get("api") == "required" {
				out = append(out, path+"."+name)
			}
			continue
		case respjson.Null:
			continue // present; a required field may be nullable (error, instructions)
		}
		out = append(out, missingRequired(v.Field(i), path+"."+name)...)
	}
	return out
}

// TestResponsesSDKRequiredFields: every object of a Responses answer that Tollgate builds
// itself (a chat backend's answer translated) carries each field openai-go's types mark
// required — the response and its echo of the request, output items, content parts with
// their annotations, usage — whole and in every streamed event that holds an object. The
// AI SDK's openai provider refuses an answer that lacks one ("Invalid JSON response").
func TestResponsesSDKRequiredFields(t *testing.T) {
	g, _ := startIngress(t, fakellm.Options{Reply: sdkReply, Chunks: 3})
	c := responsesClient(g.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	text := responses.ResponseNewParams{Model: responsesModels[0], Instructions: oai.String("Be brief."),
		Input:     responses.ResponseNewParamsInputUnion{OfString: oai.String("Say hello.")},
		Reasoning: oai.ReasoningParam{Effort: oai.ReasoningEffortLow, Summary: oai.ReasoningSummaryAuto}}
	call := responses.ResponseNewParams{Model: responsesModels[0], Tools: []responses.ToolUnionParam{execTool},
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("List the files.")}}
	for name, p := range map[string]responses.ResponseNewParams{"text": text, "tool call": call} {
		t.Run(name, func(t *testing.T) {
			res, err := c.Responses.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Output) == 0 {
				t.Fatalf("no output: %s", res.RawJSON())
			}
			if miss := missingRequired(reflect.ValueOf(res), "response"); len(miss) > 0 {
				t.Errorf("whole answer lacks %v: %s", miss, res.RawJSON())
			}
			s := c.Responses.NewStreaming(ctx, p)
			for s.Next() {
				ev := s.Current()
				var obj any
				switch {
				case ev.JSON.Response.Valid():
					obj = ev.Response
				case ev.JSON.Item.Valid():
					obj = ev.Item
				case ev.JSON.Part.Valid():
					obj = ev.Part
				default:
					continue
				}
				if miss := missingRequired(reflect.ValueOf(obj), ev.Type); len(miss) > 0 {
					t.Errorf("%s lacks %v: %s", ev.Type, miss, ev.RawJSON())
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
	g.waitIdle(t)
}
