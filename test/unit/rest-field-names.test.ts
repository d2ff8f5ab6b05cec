import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import { errorBody, toDomainError } from '../../src/http/errors.js';
import { restFieldName } from '../../src/http/rest/field-names.js';

/** The core names fields by neutral paths; REST's one error writer renders its snake_case names. */
describe('REST rendering of core field paths', () => {
  it('turns camelCase paths into snake_case and leaves other names alone', () => {
    expect(restFieldName('shippingAddress.postalCode')).toBe('shipping_address.postal_code');
    expect(restFieldName('items[12].productId')).toBe('items[12].product_id');
    expect(restFieldName('authorId')).toBe('author_id');
    expect(restFieldName('amountOffCents')).toBe('amount_off_cents');
    expect(restFieldName('email')).toBe('email');
    expect(restFieldName('shipping_address.postal_code')).toBe('shipping_address.postal_code');
    expect(restFieldName('Idempotency-Key')).toBe('Idempotency-Key');
  });

  it('renames the field and a message that starts with it, in details and the top message', () => {
    const core = new DomainError('unprocessable', 'couponCode SPRING is not an active coupon', [
      { field: 'couponCode', message: 'couponCode SPRING is not an active coupon', code: 'unknown_coupon' },
      { field: 'items[0].productId', message: 'product prd_x does not exist', code: 'unknown_product' },
      { field: null, message: 'something else', code: 'invalid' },
    ]);
    const { status, body } = errorBody(core, 'req-1');
    expect(status).toBe(422);
    expect(body).toEqual({
      error: 'validation_error',
      message: 'coupon_code SPRING is not an active coupon',
      request_id: 'req-1',
      details: [
        {
          field: 'coupon_code',
          message: 'coupon_code SPRING is not an active coupon',
          code: 'unknown_coupon',
        },
        { field: 'items[0].product_id', message: 'product prd_x does not exist', code: 'unknown_product' },
        { field: null, message: 'something else', code: 'invalid' },
      ],
    });
    // The core error itself is untouched: GraphQL renders the same error with its input names.
    expect(core.details[0]!.field).toBe('couponCode');
  });

  it('keeps names from the request schema exactly as the client sent them', () => {
    const fromSchema = toDomainError(
      Object.assign(new Error('body/fooBar must NOT have additional properties'), {
        statusCode: 400,
        validation: [
          { instancePath: '', keyword: 'additionalProperties', params: { additionalProperty: 'fooBar' } },
        ],
        validationContext: 'body',
      }),
    );
    expect(errorBody(fromSchema, 'req-2').body.details[0]!.field).toBe('fooBar');
  });
});
