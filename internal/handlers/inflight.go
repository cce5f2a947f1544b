package handlers

import (
	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
)

// admitBody holds the request's body in the node's budget of request bytes
// in flight until the request is done; past the budget it answers 503 with
// Retry-After before reading any of it. It runs once the caller is known,
// so an unauthenticated request holds none of the budget.
func admitBody(budget *service.BodyBudget) gin.HandlerFunc {
	return func(c *gin.Context) {
		body, release, err := budget.Admit(c.Request.Body, c.Request.ContentLength)
		if err != nil {
			fail(c, err)
			return
		}
		defer release()
		c.Request.Body = body
		c.Next()
	}
}
